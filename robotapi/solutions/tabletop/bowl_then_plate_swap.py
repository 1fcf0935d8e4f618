# %% [markdown]
# Reference solution: (swapped layout) the red block into the bowl first, then the green block onto the plate.

# %%
def put(block, place, above):
    """Pick `block` and release it `above` metres over the top of `place` (a bowl, the plate, a block)."""
    grasp = robo.pick(block)
    assert grasp.success, grasp
    x, y, top = robo.segment(place).top_xyz
    robo.move_to([x, y, top + 0.12])
    robo.move_to([x, y, top + above], step_clip=0.01)
    robo.release()
    if not robo.done:
        robo.move_to([x, y, top + 0.15])

# %%
put("red_block", "bowl", 0.035)

# %%
put("green_block", "plate", 0.03)
robo.state()
