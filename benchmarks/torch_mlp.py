"""The per-op workload of bench_torch_ops.py and bench_torch_memory.py, written once: source text their child
scripts include after ``import torch``. ``steps`` steps of a small MLP forward + backward + SGD step on CPU, one
thread (small tensors, so the per-op cost of recording ops and allocations dominates); ``work()`` runs them.
Text, not a function: the children run it at their module level, the loop reading globals as it always did."""

MLP_TRAINING = r"""torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, target = torch.randn(8, 16), torch.randn(8, 4)

def work():
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), target).backward()
        opt.step()
"""
