# %% [markdown]
# Reference solution: close the drawer (cabinet on the other side) by pushing its handle toward the cabinet with the gripper closed.

# %%
handle = robo.segment("drawer_handle")
x, y, z = handle.top_xyz
robo.set_gripper(robo.CLOSE, steps=6)
robo.move_to([x - 0.06, y, z + 0.10], target_yaw=1.5708)
robo.move_to([x - 0.06, y, z - 0.01], step_clip=0.01)

# %%
robo.move_to([x + 0.17, y, z - 0.01], step_clip=0.01, max_steps=150)

# %%
if not robo.done:
    robo.move_to([x, y, z + 0.15])
robo.state()
