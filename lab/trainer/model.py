"""The lab trainer's model: a two-layer MLP learning a fixed random teacher, trained by SGD with momentum.

Everything a resume needs is state that a checkpoint must carry, as in a real training job: the
parameters, the optimizer's momentum buffers, the global step (the learning-rate schedule is a function of
it) and the data RNG's state (each batch is drawn from it, so it is the sampler's position). The teacher is
not state: it is regenerated from its own seed. With one BLAS thread (``__main__`` sets it) every step is
bit-for-bit reproducible, so a resumed run can be compared with an uninterrupted one exactly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from typing import Any

import numpy as np

_MASK64 = (1 << 64) - 1


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes and hyperparameters; about 0.54 M parameters (2.2 MB as float32, as much again of momentum)."""

    seed: int = 20261201
    inputs: int = 512
    hidden: int = 1024
    outputs: int = 16
    teacher_hidden: int = 64
    batch: int = 64
    learning_rate: float = 0.05
    momentum: float = 0.9
    schedule_steps: int = 1000  # cosine decay of the learning rate over this many steps


@dataclasses.dataclass
class State:
    """What a checkpoint holds: parameters, momentum buffers, the global step and the data RNG."""

    params: dict[str, np.ndarray]
    momentum: dict[str, np.ndarray]
    step: int
    rng: np.random.Generator


def initial_state(config: Config) -> State:
    """Step 0: He-initialised weights, zero biases and momentum, the data RNG at its seed."""
    init = np.random.default_rng(config.seed)
    params = {
        "w1": (init.standard_normal((config.inputs, config.hidden)) * math.sqrt(2 / config.inputs)).astype(np.float32),
        "b1": np.zeros(config.hidden, np.float32),
        "w2": (init.standard_normal((config.hidden, config.outputs)) * math.sqrt(1 / config.hidden)).astype(np.float32),
        "b2": np.zeros(config.outputs, np.float32),
    }
    momentum = {name: np.zeros_like(value) for name, value in params.items()}
    return State(params, momentum, 0, np.random.Generator(np.random.PCG64(config.seed + 1)))


def teacher(config: Config) -> tuple[np.ndarray, np.ndarray]:
    """The fixed function the model learns (not training state: regenerated from its seed)."""
    rng = np.random.default_rng(config.seed + 2)
    w1 = rng.standard_normal((config.inputs, config.teacher_hidden)).astype(np.float32) / np.float32(math.sqrt(64))
    w2 = rng.standard_normal((config.teacher_hidden, config.outputs)).astype(np.float32)
    return w1, w2


def learning_rate(config: Config, step: int) -> np.float32:
    progress = min(step, config.schedule_steps) / config.schedule_steps
    return np.float32(config.learning_rate * 0.5 * (1 + math.cos(math.pi * progress)))


def train_step(config: Config, state: State, target: tuple[np.ndarray, np.ndarray]) -> float:
    """One SGD-with-momentum step on a batch drawn from the state's RNG; returns the batch's loss."""
    x = state.rng.standard_normal((config.batch, config.inputs), dtype=np.float32)
    y = np.tanh(x @ target[0]) @ target[1]
    p = state.params
    hidden = np.tanh(x @ p["w1"] + p["b1"])
    error = hidden @ p["w2"] + p["b2"] - y
    loss = float(np.mean(error * error))
    d_out = error * np.float32(2 / error.size)
    d_hidden = (d_out @ p["w2"].T) * (1 - hidden * hidden)
    grads = {"w2": hidden.T @ d_out, "b2": d_out.sum(0), "w1": x.T @ d_hidden, "b1": d_hidden.sum(0)}
    lr, mu = learning_rate(config, state.step), np.float32(config.momentum)
    for name, grad in grads.items():
        velocity = state.momentum[name]
        velocity *= mu
        velocity += grad
        p[name] -= lr * velocity
    state.step += 1
    return loss


def digest(tensors: dict[str, np.ndarray]) -> str:
    """SHA-256 over names, dtypes, shapes and bytes: equal digests mean bit-for-bit equal tensors."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        value = np.ascontiguousarray(tensors[name])
        h.update(f"{name}:{value.dtype.str}:{value.shape}\n".encode())
        h.update(value.tobytes())
    return h.hexdigest()


def rng_to_array(rng: np.random.Generator) -> np.ndarray:
    """PCG64's whole state (two 128-bit integers and the cached half-word) as six uint64 values."""
    state: dict[str, Any] = rng.bit_generator.state
    inner = state["state"]
    parts = [inner["state"] >> 64, inner["state"] & _MASK64, inner["inc"] >> 64, inner["inc"] & _MASK64]
    return np.array([*parts, state["has_uint32"], state["uinteger"]], dtype=np.uint64)


def rng_from_array(values: np.ndarray) -> np.random.Generator:
    high, low, inc_high, inc_low, has_uint32, uinteger = (int(v) for v in values)
    bit_generator = np.random.PCG64()
    bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": (high << 64) | low, "inc": (inc_high << 64) | inc_low},
        "has_uint32": has_uint32,
        "uinteger": uinteger,
    }
    return np.random.Generator(bit_generator)
