# %% [markdown]
# Reference solution: close the drawer (cabinet on the other side) by grasping its handle from above and pushing it into the cabinet.

# %%
handle = robo.segment("drawer_handle")
x, y, z = handle.top_xyz
robo.move_to([x, y, z + 0.10], robo.OPEN, target_yaw=0.0)
robo.move_to([x, y, z - 0.012], step_clip=0.01)
robo.set_gripper(robo.CLOSE, steps=10)

# %%
robo.move_to([x + 0.25, y, z - 0.012], step_clip=0.01, max_steps=150)

# %%
if not robo.done:
    robo.release()
robo.state()
