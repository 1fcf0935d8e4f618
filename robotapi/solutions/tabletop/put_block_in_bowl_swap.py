# %% [markdown]
# Reference solution: put the red block in the bowl (objects and fixtures swapped). Uses only `robo`.

# %%
grasp = robo.pick("red_block")
assert grasp.success, grasp

# %%
x, y, _ = robo.segment("bowl").top_xyz
robo.move_to([x, y, 0.16])
robo.move_to([x, y, 0.08])
robo.release()

# %%
if not robo.done:
    robo.move_to([x, y, 0.2])
robo.state()
