"""Training of the bundled model (public/models/tiny-shakespeare/); needs PyTorch."""
