"""A training loop of one's own: the network as a Model, everything else written in Python.

    python3 -m venv v && v/bin/pip install . && v/bin/python examples/custom_loop.py --epochs 2

`model(x)` runs the network with autograd on a tensor batch; the loss comes from `ae.functional`;
`ae.AdamW(...).build(model.parameters(), total_steps=...)` is the engine's optimizer over the model's
own parameters, with its cosine schedule over the run. The loop clips the gradients, which
`Model.train` would otherwise do. Options: --dataset fashion-mnist | cifar-10, --epochs N, --limit N (first N
training images), --batch N, --seed N.
"""

import argparse

import numpy as np

import aether as ae


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="fashion-mnist", choices=["fashion-mnist", "cifar-10"])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="train on the first N images (0: all)")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    (X, y), (Xt, yt) = ae.datasets.load(args.dataset)  # uint8 NHWC images, int64 labels
    if args.limit:
        X, y = X[:args.limit], y[:args.limit]
    mean, std = X.mean(axis=(0, 1, 2)) / 255, X.std(axis=(0, 1, 2)) / 255
    norm = lambda images: ((images.astype(np.float32) / 255 - mean) / std).astype(np.float32)  # (N, H, W, C)

    model = ae.Model(); model.manual_seed(args.seed)
    c = X.shape[-1]
    for layer in [ae.Conv2d(c, 32, 3, padding=1, bias=False), ae.BatchNorm(), ae.ReLU(), ae.MaxPool2d(2),
                  ae.Conv2d(32, 64, 3, padding=1, bias=False), ae.BatchNorm(), ae.ReLU(), ae.MaxPool2d(2),
                  ae.GlobalAvgPool(), ae.Dense(64, 10)]:
        model.add(layer)
    # configure() is the Model's own training recipe; this loop does not use it.
    model.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD())
    model.finalize(input_shape=X.shape[1:])

    steps_per_epoch = len(X) // args.batch
    opt = ae.AdamW(lr=3e-3, weight_decay=5e-4, schedule="cosine").build(model.parameters(),
                                                                        total_steps=steps_per_epoch * args.epochs)
    rng = np.random.default_rng(args.seed)
    for epoch in range(args.epochs):
        order = rng.permutation(len(X))
        running = 0.0
        for b in range(steps_per_epoch):
            idx = order[b * args.batch:(b + 1) * args.batch]
            x, labels = ae.tensor(norm(X[idx])), ae.tensor(y[idx])
            loss = ae.functional.cross_entropy(model(x), labels, label_smoothing=0.1)
            loss.backward()
            ae.clip_grad_norm(model.parameters(), 5.0)
            opt.step()
            opt.zero_grad()
            running += loss.item()
        print(f"epoch {epoch + 1}: loss {running / steps_per_epoch:.4f}")

    # Evaluation: BatchNorm with its running statistics, no autograd.
    model.network.eval()
    correct = 0
    with ae.no_grad():
        for b in range(0, len(Xt), 500):
            logits = model(ae.tensor(norm(Xt[b:b + 500])))
            correct += int((np.asarray(logits).argmax(1) == yt[b:b + 500]).sum())
    model.network.train()
    print(f"test accuracy: {correct / len(Xt):.6f}")


if __name__ == "__main__":
    main()
