import pytest

from xpuprof import rank


@pytest.mark.parametrize("env, expected", [
    ({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}, (3, 8, 1, 4, "torchrun")),
    ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}, (2, 4, 0, 4, "openmpi")),
    ({"PMI_RANK": "1", "PMI_SIZE": "2"}, (1, 2, 1, 2, "mpich")),
    ({"PALS_RANKID": "5", "PALS_SIZE": "12", "PALS_LOCAL_RANKID": "5"}, (5, 12, 5, 12, "pals")),
    ({"SLURM_PROCID": "7", "SLURM_NTASKS": "16", "SLURM_LOCALID": "3", "SLURM_NTASKS_PER_NODE": "4(x4)"}, (7, 16, 3, 4, "slurm")),
    # torchrun inside an srun allocation: torchrun's variables win.
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "RANK": "5", "WORLD_SIZE": "6"}, (5, 6, 5, 6, "torchrun")),
])
def test_detect(env, expected):
    info = rank.detect(env)
    assert (info.rank, info.world_size, info.local_rank, info.local_world_size, info.launcher) == expected
    assert info.trace_suffix == f".rank{expected[0]}"
    d = info.distributed_info("nccl")
    assert list(d)[0] == "rank" and d["world_size"] == expected[1] and d["backend"] == "nccl"


def test_single_process_has_no_rank():
    assert rank.detect({}) is None
    assert rank.distributed_info({}) is None and rank.trace_suffix({}) == ""


def test_bad_values_are_clear_errors():
    with pytest.raises(rank.RankEnvError, match=r"RANK='x' is not a rank or size \(an integer 0\.\."):
        rank.detect({"RANK": "x", "WORLD_SIZE": "2"})
    with pytest.raises(rank.RankEnvError, match="RANK=4 is not within WORLD_SIZE=2"):
        rank.detect({"RANK": "4", "WORLD_SIZE": "2"})
