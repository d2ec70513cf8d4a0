"""Stable-Baselines3's side of ``sac_updates.py``: SB3's SAC update, timed, in the SB3 venv.

    SB3_VENV/bin/python benchmarks/_sb3_sac_updates.py SPEC.json RESULT.json

``SPEC.json``: ``env_id``, ``steps`` (gradient steps timed), ``fill`` (random env steps in
replay first), ``threads``, ``seed`` and ``kwargs`` (SAC's constructor arguments). SB3's
``SAC.train(steps)`` is timed alone (its update, one gradient step per loop), then
``learn(steps)`` (one env step and one gradient step each: acting, the env, the replay add,
the update). ``RESULT.json``: process CPU seconds and wall seconds of each.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import gymnasium as gym
import torch
from stable_baselines3 import SAC


def main(spec_path: str, result_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    torch.set_num_threads(spec["threads"])
    torch.set_num_interop_threads(spec["threads"])
    steps, fill = spec["steps"], spec["fill"]
    env = gym.make(spec["env_id"])
    model = SAC(
        "MlpPolicy",
        env,
        seed=spec["seed"],
        device="cpu",
        verbose=0,
        learning_starts=fill,
        **spec["kwargs"],
    )
    model.learn(total_timesteps=fill)  # random actions into replay, no update
    model.train(gradient_steps=10, batch_size=model.batch_size)  # warm-up, not timed
    out = {}
    for name, run in (
        ("train", lambda: model.train(gradient_steps=steps, batch_size=model.batch_size)),
        ("learn", lambda: model.learn(total_timesteps=steps, reset_num_timesteps=False)),
    ):
        c0, w0 = time.process_time(), time.monotonic()
        run()
        out[name] = {"cpu_s": time.process_time() - c0, "wall_s": time.monotonic() - w0}
    out["steps"] = steps
    out["versions"] = {"torch": torch.__version__, "threads": torch.get_num_threads()}
    Path(result_path).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
