"""The usual TD3 learner, as a baseline: PyTorch eager, one gradient step per call.

Written here from the algorithm as CleanRL's ``td3_continuous_action.py`` runs it (same
networks, optimisers, hyper-parameters and order of operations), not copied from it:
separate twin critics ``[obs, act] -> 256 -> 256 -> 1``, an actor ``obs -> 256 -> 256 ->
tanh`` scaled to the bounds, one Adam over both critics, policy delay 2, target noise 0.2
clipped at 0.5, Polyak 0.005, all in float32 on the CPU. Benchmark-only: PyTorch is not a
dependency of edge-rl (``pip install torch==2.13.0`` takes the CPU wheel on this machine).
"""

from __future__ import annotations

import numpy as np


def make_torch_td3(obs_dim: int, act_dim: int, hidden: int = 256, seed: int = 0):
    """A callable ``step(obs, act, rew, next_obs, terminated)`` on numpy arrays."""
    import torch
    from torch import nn

    torch.manual_seed(seed)

    def mlp(n_in: int, n_out: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Linear(n_in, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, n_out),
        )

    actor, actor_t = mlp(obs_dim, act_dim), mlp(obs_dim, act_dim)
    q1, q1_t, q2, q2_t = (mlp(obs_dim + act_dim, 1) for _ in range(4))
    for net, target in ((actor, actor_t), (q1, q1_t), (q2, q2_t)):
        target.load_state_dict(net.state_dict())
    q_opt = torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=3e-4)
    pi_opt = torch.optim.Adam(actor.parameters(), lr=3e-4)
    scale, bias = torch.ones(act_dim), torch.zeros(act_dim)  # bounds [-1, 1]
    gamma, tau, noise, noise_clip, delay = 0.99, 0.005, 0.2, 0.5, 2
    steps = [0]

    def pi(net: nn.Module, s: torch.Tensor) -> torch.Tensor:
        return torch.tanh(net(s)) * scale + bias

    def step(obs, act, rew, next_obs, terminated) -> float:
        s, a, s2 = (torch.from_numpy(np.ascontiguousarray(x)) for x in (obs, act, next_obs))
        r, d = torch.from_numpy(rew), torch.from_numpy(terminated)
        with torch.no_grad():
            eps = (torch.randn_like(a) * noise).clamp(-noise_clip, noise_clip) * scale
            a2 = (pi(actor_t, s2) + eps).clamp(-1.0, 1.0)
            sa2 = torch.cat([s2, a2], 1)
            q_next = torch.min(q1_t(sa2), q2_t(sa2)).view(-1)
            y = r + gamma * (1.0 - d) * q_next
        sa = torch.cat([s, a], 1)
        loss = ((q1(sa).view(-1) - y) ** 2).mean() + ((q2(sa).view(-1) - y) ** 2).mean()
        q_opt.zero_grad()
        loss.backward()
        q_opt.step()
        steps[0] += 1
        if steps[0] % delay == 0:
            pi_loss = -q1(torch.cat([s, pi(actor, s)], 1)).mean()
            pi_opt.zero_grad()
            pi_loss.backward()
            pi_opt.step()
            with torch.no_grad():
                for net, target in ((actor, actor_t), (q1, q1_t), (q2, q2_t)):
                    for p, p_t in zip(net.parameters(), target.parameters(), strict=True):
                        p_t.mul_(1.0 - tau).add_(p, alpha=tau)
        return float(loss.detach())

    return step
