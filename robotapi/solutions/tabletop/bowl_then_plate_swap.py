# %% [markdown]
# Reference solution: (swapped layout) the red block into the bowl first, then the green block onto the plate.

# %%
grasp = robo.pick("red_block")
assert grasp.success, grasp
bx, by, _ = robo.segment("bowl").top_xyz
robo.move_to([bx, by, 0.16])
robo.move_to([bx, by, 0.08])
robo.release()
robo.move_to([bx, by, 0.16])

# %%
grasp = robo.pick("green_block")
assert grasp.success, grasp
px, py, pz = robo.segment("plate").top_xyz
robo.move_to([px, py, 0.15])
robo.move_to([px, py, pz + 0.03])
robo.release()

# %%
if not robo.done:
    robo.move_to([px, py, 0.2])
robo.state()
