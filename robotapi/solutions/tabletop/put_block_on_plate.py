# %% [markdown]
# Reference solution: put the green block on the plate. Uses only `robo`.

# %%
grasp = robo.pick("green_block")
assert grasp.success, grasp

# %%
plate = robo.segment("plate")
x, y, z = plate.top_xyz
robo.move_to([x, y, 0.15])
robo.move_to([x, y, z + 0.03])
robo.release()

# %%
if not robo.done:
    robo.move_to([x, y, 0.2])
robo.state()
