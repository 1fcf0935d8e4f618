"""MJCF for the embedded tabletop: a Franka Panda (robosuite's MIT-licensed meshes) on a table with
blocks, a bowl, a plate and a drawer cabinet. Built in code so every task shares one model; layouts are
applied per seed through qpos / body_pos, never by recompiling."""

from __future__ import annotations

import importlib.util
import math
import os

BLOCK_HALF = 0.02          # 4 cm cubes
BOWL_RADIUS = 0.075
PLATE_RADIUS = 0.08
DRAWER_TRAVEL = 0.20       # drawer slide range (m), 0 = closed, positive = pulled toward the robot
CAB_HALF = (0.10, 0.12, 0.06)  # cabinet half extents x, y, z
TABLE_Z = 0.0

BLOCK_COLORS = {"red_block": "0.85 0.15 0.12 1", "green_block": "0.15 0.7 0.2 1", "blue_block": "0.15 0.3 0.85 1"}
ARM_JOINTS = tuple(f"joint{i}" for i in range(1, 8))
HOME_QPOS = (0.0, -0.3, 0.0, -2.2, 0.0, 1.9, 0.785398)


class MissingAssets(RuntimeError):
    """The Panda meshes are not installed (robosuite wheel, assets only)."""


def panda_mesh_dirs() -> tuple[str, str]:
    """Locate robosuite's Panda and gripper mesh folders without importing robosuite."""
    spec = importlib.util.find_spec("robosuite")
    if spec is None or not spec.submodule_search_locations:
        raise MissingAssets(
            "tabletop needs the Panda meshes from the robosuite wheel: "
            "run `.venv/bin/pip install --no-deps robosuite==1.5.2` (scripts/setup.d/robot.sh does)")
    root = os.path.join(list(spec.submodule_search_locations)[0], "models", "assets")
    arm = os.path.join(root, "robots", "panda", "meshes")
    hand = os.path.join(root, "grippers", "meshes", "panda_gripper")
    for d in (arm, hand):
        if not os.path.isdir(d):
            raise MissingAssets(f"robosuite is installed but {d} is missing")
    return arm, hand


def _bowl_walls(n: int = 14) -> str:
    parts = []
    r = BOWL_RADIUS
    seg = 2 * r * math.tan(math.pi / n) * 0.55
    for i in range(n):
        a = 2 * math.pi * i / n
        parts.append(
            f'<geom type="box" size="0.004 {seg:.4f} 0.02" pos="{r*math.cos(a):.4f} {r*math.sin(a):.4f} 0.026" '
            f'euler="0 0 {a:.4f}" material="bowl" class="obj"/>')
    return "\n".join(parts)


def build_mjcf() -> str:
    arm_dir, hand_dir = panda_mesh_dirs()
    meshes = "\n".join(f'<mesh name="link{i}" file="{arm_dir}/link{i}.stl"/>' for i in range(8))
    blocks = "\n".join(
        f'''<body name="{name}" pos="0.5 {0.1*k:.2f} {BLOCK_HALF}">
  <freejoint name="{name}"/>
  <geom name="{name}" type="box" size="{BLOCK_HALF} {BLOCK_HALF} {BLOCK_HALF}" rgba="{rgba}" mass="0.05" class="obj"/>
</body>''' for k, (name, rgba) in enumerate(BLOCK_COLORS.items()))
    cx, cy, cz = CAB_HALF
    wall = 0.006
    # arm link geoms: links 0-4 are visual only (they stay far from objects), 5-7 collide.
    def link_geom(i: int) -> str:
        collide = i >= 5
        c = 'contype="2" conaffinity="1"' if collide else 'contype="0" conaffinity="0"'
        return f'<geom type="mesh" mesh="link{i}" material="{"arm" if i not in (0, 7) else "armdark"}" {c}/>'
    return f'''<mujoco model="pyrualean_tabletop">
<compiler angle="radian" autolimits="true"/>
<option timestep="0.002" integrator="implicitfast" cone="elliptic" impratio="4">
  <flag multiccd="enable"/>
</option>
<visual>
  <global offwidth="640" offheight="640"/>
  <quality shadowsize="0" offsamples="0"/>
  <headlight ambient="0.45 0.45 0.45" diffuse="0.55 0.55 0.55" specular="0.05 0.05 0.05"/>
  <map znear="0.01" zfar="10"/>
</visual>
<default>
  <default class="obj"><geom contype="1" conaffinity="1" condim="4" friction="1 0.01 0.001" solref="0.01 1"/></default>
  <default class="arm"><joint armature="0.1" damping="1"/></default>
</default>
<asset>
  {meshes}
  <mesh name="hand" file="{hand_dir}/hand.stl"/>
  <mesh name="finger" file="{hand_dir}/finger.stl"/>
  <texture name="grid" type="2d" builtin="checker" rgb1="0.55 0.42 0.3" rgb2="0.5 0.38 0.27" width="64" height="64"/>
  <material name="table" texture="grid" texrepeat="8 8" reflectance="0"/>
  <material name="arm" rgba="0.92 0.92 0.93 1" reflectance="0"/>
  <material name="armdark" rgba="0.25 0.25 0.25 1" reflectance="0"/>
  <material name="bowl" rgba="0.9 0.85 0.3 1" reflectance="0"/>
  <material name="plate" rgba="0.95 0.95 0.95 1" reflectance="0"/>
  <material name="wood" rgba="0.55 0.35 0.2 1" reflectance="0"/>
  <material name="drawer" rgba="0.75 0.55 0.35 1" reflectance="0"/>
  <material name="floor" rgba="0.3 0.32 0.35 1" reflectance="0"/>
</asset>
<worldbody>
  <light name="top" pos="0.4 0 2.0" dir="0 0 -1" diffuse="0.5 0.5 0.5" castshadow="false"/>
  <geom name="floor" type="plane" size="3 3 0.1" pos="0 0 -0.75" material="floor" contype="1" conaffinity="1"/>
  <geom name="table" type="box" size="0.65 0.6 0.375" pos="0.35 0 -0.375" material="table" contype="1" conaffinity="1" condim="4"/>
  <camera name="agentview" pos="1.3 0 0.95" xyaxes="0 1 0 -0.726 0 0.688" fovy="45"/>
  <body name="link0" pos="0 0 0" childclass="arm">
    {link_geom(0)}
    <body name="link1" pos="0 0 0.333" gravcomp="1">
      <inertial pos="0 0 -0.07" mass="3" diaginertia="0.3 0.3 0.3"/>
      <joint name="joint1" axis="0 0 1" range="-2.8973 2.8973"/>
      {link_geom(1)}
      <body name="link2" quat="0.707107 -0.707107 0 0" gravcomp="1">
        <inertial pos="0 -0.1 0" mass="3" diaginertia="0.3 0.3 0.3"/>
        <joint name="joint2" axis="0 0 1" range="-1.7628 1.7628"/>
        {link_geom(2)}
        <body name="link3" pos="0 -0.316 0" quat="0.707107 0.707107 0 0" gravcomp="1">
          <inertial pos="0.04 0 -0.05" mass="2" diaginertia="0.2 0.2 0.2"/>
          <joint name="joint3" axis="0 0 1" range="-2.8973 2.8973"/>
          {link_geom(3)}
          <body name="link4" pos="0.0825 0 0" quat="0.707107 0.707107 0 0" gravcomp="1">
            <inertial pos="-0.04 0.05 0" mass="2" diaginertia="0.2 0.2 0.2"/>
            <joint name="joint4" axis="0 0 1" range="-3.0718 -0.0698"/>
            {link_geom(4)}
            <body name="link5" pos="-0.0825 0.384 0" quat="0.707107 -0.707107 0 0" gravcomp="1">
              <inertial pos="0 0 -0.15" mass="2" diaginertia="0.2 0.2 0.2"/>
              <joint name="joint5" axis="0 0 1" range="-2.8973 2.8973"/>
              {link_geom(5)}
              <body name="link6" quat="0.707107 0.707107 0 0" gravcomp="1">
                <inertial pos="0.06 0 0" mass="1.5" diaginertia="0.1 0.1 0.1"/>
                <joint name="joint6" axis="0 0 1" range="-0.0175 3.7525"/>
                {link_geom(6)}
                <body name="link7" pos="0.088 0 0" quat="0.707107 0.707107 0 0" gravcomp="1">
                  <inertial pos="0 0 0.08" mass="0.5" diaginertia="0.05 0.05 0.05"/>
                  <joint name="joint7" axis="0 0 1" range="-2.8973 2.8973"/>
                  {link_geom(7)}
                  <body name="hand" pos="0 0 0.1065" quat="0.382683 0 0 -0.92388" gravcomp="1">
                    <inertial pos="0 0 0.05" mass="0.6" diaginertia="0.01 0.01 0.01"/>
                    <geom type="mesh" mesh="hand" quat="0.707107 0 0 0.707107" material="arm" contype="2" conaffinity="1"/>
                    <camera name="wrist" pos="0 -0.075 0.02" xyaxes="1 0 0 0 -0.939 0.343" fovy="75"/>
                    <site name="eef" pos="0 0 0.1034" size="0.006" rgba="1 0 0 0" group="4"/>
                    <body name="leftfinger" pos="0 0 0.0524" quat="0.707107 0 0 0.707107" gravcomp="1">
                      <inertial pos="0 0 0.03" mass="0.05" diaginertia="0.0001 0.0001 0.0001"/>
                      <joint name="finger_joint1" type="slide" axis="0 1 0" range="0 0.04" damping="20" armature="0.05"/>
                      <geom type="mesh" mesh="finger" material="armdark" contype="0" conaffinity="0"/>
                      <geom name="leftpad" type="box" size="0.009 0.005 0.018" pos="0 0.0055 0.037" rgba="0.2 0.2 0.2 1"
                            contype="2" conaffinity="1" condim="4" friction="1.5 0.02 0.001" solref="0.01 1"/>
                    </body>
                    <body name="rightfinger" pos="0 0 0.0524" quat="0.707107 0 0 0.707107" gravcomp="1">
                      <inertial pos="0 0 0.03" mass="0.05" diaginertia="0.0001 0.0001 0.0001"/>
                      <joint name="finger_joint2" type="slide" axis="0 1 0" range="-0.04 0" damping="20" armature="0.05"/>
                      <geom type="mesh" mesh="finger" quat="0 0 0 1" material="armdark" contype="0" conaffinity="0"/>
                      <geom name="rightpad" type="box" size="0.009 0.005 0.018" pos="0 -0.0055 0.037" rgba="0.2 0.2 0.2 1"
                            contype="2" conaffinity="1" condim="4" friction="1.5 0.02 0.001" solref="0.01 1"/>
                    </body>
                  </body>
                </body>
              </body>
            </body>
          </body>
        </body>
      </body>
    </body>
  </body>
  {blocks}
  <body name="bowl" pos="0.55 -0.2 0">
    <freejoint name="bowl"/>
    <geom type="cylinder" size="{BOWL_RADIUS} 0.004" pos="0 0 0.004" material="bowl" mass="0.25" class="obj"/>
    {_bowl_walls()}
  </body>
  <body name="plate" pos="0.55 0.2 0">
    <freejoint name="plate"/>
    <geom type="cylinder" size="{PLATE_RADIUS} 0.005" pos="0 0 0.005" material="plate" mass="0.2" class="obj"/>
  </body>
  <body name="cabinet" pos="0.75 0.0 0">
    <geom type="box" size="{cx} {cy} {wall/2}" pos="0 0 {2*cz - wall/2}" material="wood" class="obj"/>
    <geom type="box" size="{cx} {cy} {wall/2}" pos="0 0 {wall/2}" material="wood" class="obj"/>
    <geom type="box" size="{cx} {wall/2} {cz}" pos="0 {cy - wall/2} {cz}" material="wood" class="obj"/>
    <geom type="box" size="{cx} {wall/2} {cz}" pos="0 {-cy + wall/2} {cz}" material="wood" class="obj"/>
    <geom type="box" size="{wall/2} {cy} {cz}" pos="{cx - wall/2} 0 {cz}" material="wood" class="obj"/>
    <body name="drawer" pos="0 0 {cz}">
      <joint name="drawer" type="slide" axis="-1 0 0" range="0 {DRAWER_TRAVEL}" damping="8" frictionloss="0.3" armature="0.2"/>
      <geom type="box" size="{wall/2} {cy - 1.5*wall} {cz - 1.5*wall}" pos="{-cx + wall/2} 0 0" material="drawer" mass="0.3" class="obj"/>
      <geom type="box" size="{cx - 2*wall} {cy - 2*wall} {wall/2}" pos="0 0 {-cz + 2*wall}" material="drawer" mass="0.2" class="obj"/>
      <geom type="box" size="{cx - 2*wall} {wall/2} {cz - 3*wall}" pos="0 {cy - 2.5*wall} {-2*wall}" material="drawer" mass="0.05" class="obj"/>
      <geom type="box" size="{cx - 2*wall} {wall/2} {cz - 3*wall}" pos="0 {-cy + 2.5*wall} {-2*wall}" material="drawer" mass="0.05" class="obj"/>
      <geom type="box" size="{wall/2} {cy - 2*wall} {cz - 3*wall}" pos="{cx - 2.5*wall} 0 {-2*wall}" material="drawer" mass="0.05" class="obj"/>
      <body name="drawer_handle" pos="{-cx - 0.045} 0 0.01">
        <geom type="box" size="0.035 0.008 0.008" pos="0.02 0 0" material="armdark" mass="0.02" class="obj"/>
        <geom type="box" size="0.014 0.016 0.018" pos="-0.01 0 0" rgba="0.8 0.8 0.85 1" mass="0.02" class="obj"/>
      </body>
    </body>
  </body>
</worldbody>
<actuator>
  <position name="a1" joint="joint1" kp="4500" kv="450" forcerange="-87 87"/>
  <position name="a2" joint="joint2" kp="4500" kv="450" forcerange="-87 87"/>
  <position name="a3" joint="joint3" kp="3500" kv="350" forcerange="-87 87"/>
  <position name="a4" joint="joint4" kp="3500" kv="350" forcerange="-87 87"/>
  <position name="a5" joint="joint5" kp="2000" kv="200" forcerange="-12 12"/>
  <position name="a6" joint="joint6" kp="2000" kv="200" forcerange="-12 12"/>
  <position name="a7" joint="joint7" kp="2000" kv="200" forcerange="-12 12"/>
  <position name="finger1" joint="finger_joint1" kp="800" kv="20" forcerange="-30 30" ctrlrange="0 0.04"/>
  <position name="finger2" joint="finger_joint2" kp="800" kv="20" forcerange="-30 30" ctrlrange="-0.04 0"/>
</actuator>
</mujoco>'''
