"""ResNet-20 (He et al. 2016) written with aether's Python layers, trained on CIFAR-10.

    python3 -m venv v && v/bin/pip install . && v/bin/python examples/resnet.py --epochs 30

The network and recipe are the `resnet20` preset's (`aether train --model resnet20`,
`ae.Model.preset("resnet20", ...)`): a 3x3 stem, three stages of three residual blocks with 16, 32
and 64 channels (the first block of stages 2 and 3 halves the size and projects its shortcut with a
1x1 conv), global average pooling and a linear head; Nesterov SGD with a one-cycle schedule, random
crops and flips. Options: --dataset fashion-mnist (28x28x1), --epochs N, --limit N (first N
training images), --seed N.
"""

import argparse

import aether as ae


def conv_bn(c_in, c_out, kernel, stride=1):
    return [ae.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2, bias=False), ae.BatchNorm()]


def resnet20(channels, classes):
    """The layers of ResNet-20 for images with `channels` channels: 272,474 parameters for RGB."""
    layers = conv_bn(channels, 16, 3) + [ae.ReLU()]
    c = 16
    for width in (16, 32, 64):
        for block in range(3):
            stride = 2 if block == 0 and width != 16 else 1
            body = conv_bn(c, width, 3, stride) + [ae.ReLU()] + conv_bn(width, width, 3)
            shortcut = conv_bn(c, width, 1, stride) if stride != 1 or c != width else None
            layers += [ae.Residual(body, shortcut), ae.ReLU()]
            c = width
    return layers + [ae.GlobalAvgPool(), ae.Dense(c, classes)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="cifar-10", choices=["cifar-10", "fashion-mnist"])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--limit", type=int, default=0, help="train on the first N images (0: all)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    (X, y), (Xt, yt) = ae.datasets.load(args.dataset)  # uint8 NHWC images, int64 labels
    if args.limit:
        X, y = X[:args.limit], y[:args.limit]

    model = ae.Model(); model.manual_seed(args.seed)
    for layer in resnet20(X.shape[-1], 10):
        model.add(layer)
    model.configure(loss=ae.SoftmaxCategoricalCrossEntropy(label_smoothing=0.1),
                    optimizer=ae.SGD(lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4,
                                     schedule="one_cycle", warmup_fraction=0.15))
    model.finalize(input_shape=X.shape[1:])
    print(f"parameters: {sum(p.numel() for p in model.parameters())}")
    history = model.train(X, y, epochs=args.epochs, batch_size=128, shuffle=True, crop_padding=4, hflip=True,
                          validation_data=(Xt, yt))
    print(f"test accuracy: {history['val_accuracy'][-1]:.6f}")


if __name__ == "__main__":
    main()
