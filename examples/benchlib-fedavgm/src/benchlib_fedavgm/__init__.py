"""benchlib-fedavgm: FedAvg with server momentum, and an inverted-MNIST dataset source."""

__version__ = "0.1.0"
