"""XPolicyLab env-side loop for PyRUA_Lean (RoboDojo calls eval_one_episode once per episode)."""


def eval_one_episode(TASK_ENV, model_client):
    """Feed observations to the policy and execute every action of each chunk it returns. The pyrualean
    agent behind the policy decides when it is done; RoboDojo decides when the episode ends."""
    while not TASK_ENV.is_episode_end():
        obs = TASK_ENV.get_obs()
        model_client.call(func_name="update_obs", obs=obs)
        actions = model_client.call(func_name="get_action")
        for i, action in enumerate(actions):
            TASK_ENV.take_action(action)
            if TASK_ENV.is_episode_end():
                break
            if i != len(actions) - 1:
                model_client.call(func_name="update_obs", obs=TASK_ENV.get_obs())
