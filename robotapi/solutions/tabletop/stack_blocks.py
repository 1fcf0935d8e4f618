# %% [markdown]
# Reference solution: stack the red block on the blue block. Uses only `robo`.

# %%
grasp = robo.pick("red_block")
assert grasp.success, grasp

# %%
base = robo.segment("blue block")
x, y, top = base.top_xyz
robo.move_to([x, y, top + 0.10])
robo.move_to([x, y, top + 0.025], step_clip=0.01)
robo.release()

# %%
if not robo.done:
    robo.move_to([x, y, top + 0.12])
robo.state()
