"""Data-parallel training from Python: `aether launch -- python script.py` runs the unchanged
Model API on 2 ranks (docs/distributed.md); ae.rank() and ae.world_size() say where a process is;
callbacks stop every rank on rank 0's request and train at rank 0's scheduled learning rate, and
rank 0 alone writes their files."""

import subprocess
import sys
import textwrap

import numpy as np

import aether as ae

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import aether as ae
    out, batch = sys.argv[1], int(sys.argv[2])
    sync_bn = len(sys.argv) > 3  # a BatchNorm1d, synchronized over the ranks
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (150, 6, 6, 1), dtype=np.uint8)  # 150: a last, partial global batch
    y = x.reshape(150, -1).sum(axis=1) % 3
    m = ae.Model()
    m.manual_seed(5)
    m.add(ae.Flatten()); m.add(ae.Dense(36, 24))
    if sync_bn:
        m.add(ae.BatchNorm())
    m.add(ae.ReLU()); m.add(ae.Dense(24, 3))
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.05, momentum=0.9))
    m.finalize((6, 6, 1))
    h = m.train(x, y, epochs=2, batch_size=batch, seed=1, verbose=False, sync_batch_norm=sync_bn)
    params = np.concatenate([p.numpy().ravel() for p in m.parameters()])
    np.save(f"{out}.{ae.rank()}of{ae.world_size()}.npy", params)
    sys.stdout.write(f"loss {h['loss'][-1]!r}\\n")  # one write: the ranks share the pipe
""")


def test_rank_and_world_size_without_a_launcher():
    assert ae.rank() == 0 and ae.world_size() == 1


def run_one_and_two_ranks(tmp_path, cli, port, extra):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = str(tmp_path / "params")
    one = subprocess.run([sys.executable, str(script), out, "16"] + extra, capture_output=True, text=True,
                         timeout=300)
    assert one.returncode == 0, one.stdout + one.stderr
    two = subprocess.run([cli, "launch", "--nproc-per-node", "2", "--master-port", str(port), "--timeout", "120",
                          "--", sys.executable, str(script), out, "8"] + extra,
                         capture_output=True, text=True, timeout=300)
    return out, two


def test_sync_batch_norm_on_two_ranks_matches_one_rank_of_twice_the_batch(tmp_path, cli):
    out, two = run_one_and_two_ranks(tmp_path, cli, 29532, ["sync-bn"])
    assert two.returncode == 0, two.stdout + two.stderr
    p1 = np.load(out + ".0of1.npy")
    r0, r1 = np.load(out + ".0of2.npy"), np.load(out + ".1of2.npy")
    assert np.array_equal(r0, r1)
    np.testing.assert_allclose(r0, p1, rtol=0, atol=1e-4 * max(1.0, float(np.abs(p1).max())))


def test_two_ranks_from_python_match_one_rank_of_twice_the_batch(tmp_path, cli):
    out, two = run_one_and_two_ranks(tmp_path, cli, 29531, [])
    assert two.returncode == 0, two.stdout + two.stderr
    p1 = np.load(out + ".0of1.npy")
    r0, r1 = np.load(out + ".0of2.npy"), np.load(out + ".1of2.npy")
    assert np.array_equal(r0, r1)  # every rank holds the same parameters, bit for bit
    np.testing.assert_allclose(r0, p1, rtol=0, atol=1e-4 * max(1.0, float(np.abs(p1).max())))
    assert two.stdout.count("loss") == 2  # both ranks ran; the loss is the global batch's on each
    losses = [line for line in two.stdout.splitlines() if line.startswith("loss")]
    assert losses[0] == losses[1]


CALLBACKS_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import aether as ae
    out = sys.argv[1]
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (96, 6, 6, 1), dtype=np.uint8)
    y = x.reshape(96, -1).sum(axis=1) % 3
    m = ae.Model()
    m.manual_seed(5)
    m.add(ae.Flatten()); m.add(ae.Dense(36, 16)); m.add(ae.ReLU()); m.add(ae.Dense(16, 3))
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.05, momentum=0.9))
    m.finalize((6, 6, 1))
    stop_after = 2 if ae.rank() == 0 else 1  # rank 0's request decides
    lr_scale = 1 if ae.rank() == 0 else 3  # and rank 0's learning rate

    def stop(epoch, logs):
        if epoch + 1 == stop_after:
            m.stop_training = True

    h = m.train(x, y, epochs=5, batch_size=8, seed=1, verbose=False,
                callbacks=[ae.ModelCheckpoint(out + "/ck-{epoch}.aether"), ae.CSVLogger(out + "/log.csv"),
                           ae.LambdaCallback(on_epoch_end=stop),
                           ae.LearningRateScheduler(lambda epoch, lr: 0.05 / (epoch + 1) * lr_scale)])
    sys.stdout.write(f"rank {ae.rank()} epochs {len(h['loss'])} lr {h['lr']}\\n")
""")


def test_callbacks_on_two_ranks_stop_alike_and_rank_0_writes(tmp_path, cli):
    script = tmp_path / "callbacks.py"
    script.write_text(CALLBACKS_SCRIPT)
    two = subprocess.run([cli, "launch", "--nproc-per-node", "2", "--master-port", "29533", "--timeout", "120",
                          "--", sys.executable, str(script), str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stdout + two.stderr
    assert sorted(line for line in two.stdout.splitlines() if line.startswith("rank")) == \
        ["rank 0 epochs 2 lr [0.05, 0.025]", "rank 1 epochs 2 lr [0.05, 0.025]"]
    assert sorted(p.name for p in tmp_path.glob("ck-*.aether")) == ["ck-1.aether", "ck-2.aether"]
    assert ae.Model.load(str(tmp_path / "ck-2.aether")).epochs_done == 2
    rows = (tmp_path / "log.csv").read_text().splitlines()
    assert rows[0] == "epoch,accuracy,loss,lr,seconds" and [r.split(",")[0] for r in rows[1:]] == ["0", "1"]
