"""The Aether-ML example from the README, on real data: a small conv net trained on CIFAR-10.

    python3 -m venv v && v/bin/pip install . && v/bin/python examples/example.py

Options: --dataset fashion-mnist (28x28x1), --epochs N, --limit N (first N training images),
--seed N. examples/example.cpp is the same program written against the C++ API: with the same
arguments both print the same accuracy (python/tests/test_example.py checks it).
"""

import argparse

import aether as ae

parser = argparse.ArgumentParser()
parser.add_argument("--dataset", default="cifar-10", choices=["cifar-10", "fashion-mnist"])
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--limit", type=int, default=0, help="train on the first N images (0: all)")
parser.add_argument("--seed", type=int, default=42)
args = parser.parse_args()

(X, y), (Xt, yt) = ae.datasets.load(args.dataset)  # uint8 NHWC images, int64 labels
if args.limit:
    X, y = X[:args.limit], y[:args.limit]
channels = X.shape[-1]

model = ae.Model(); model.manual_seed(args.seed)
model.add(ae.Conv2d(channels, 32, (3, 3), (1, 1), padding="same"))
model.add(ae.BatchNorm(epsilon=1e-5, momentum=0.9)); model.add(ae.ReLU())
model.add(ae.MaxPool2d((2, 2), (2, 2), padding="valid"))
model.add(ae.GlobalAvgPool()); model.add(ae.Dense(32, 10))
model.configure(loss=ae.SoftmaxCategoricalCrossEntropy(label_smoothing=0.05),
                optimizer=ae.AdamW(lr=1e-3, weight_decay=0.01),
                accuracy=ae.CategoricalAccuracy())
model.to("cpu"); model.finalize(input_shape=X.shape[1:])
# uint8 pixels: the engine scales them to [0, 1] and normalises each channel with X's statistics.
history = model.train(X, y, epochs=args.epochs, batch_size=128, shuffle=True, validation_data=(Xt, yt))
print(f"test accuracy: {history['val_accuracy'][-1]:.6f}")
