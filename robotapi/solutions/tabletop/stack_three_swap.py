# %% [markdown]
# Reference solution: blue at the bottom, green on it, red on top (swapped layout). Uses only `robo`.

# %%
def place_on(block, base_name):
    grasp = robo.pick(block)
    assert grasp.success, grasp
    base = robo.segment(base_name)
    x, y, top = base.top_xyz
    robo.move_to([x, y, top + 0.10])
    robo.move_to([x, y, top + 0.025], step_clip=0.01)
    robo.release()
    if not robo.done:
        robo.move_to([x, y, top + 0.12])

# %%
place_on("green_block", "blue_block")

# %%
place_on("red_block", "green_block")
robo.state()
