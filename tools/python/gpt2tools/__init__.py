"""The project's Python tools (Debian's Python and NumPy; PyTorch only where a module says so).

Top level: the formats and the float64 reference, importable by every tool and sharing no code with the C++
engine, so that they can check it: safetensors_io (safetensors reader and writer), gguf_io (GGUF v3 reader and
writer), gguf_blocks (ggml's block formats in NumPy), reference_gpt2 (GPT-2's forward pass in float64),
reference_sampling (the sampler's logits processors and warpers in float64).
Sub-packages, each module run with `python3 -m gpt2tools.<package>.<module>` and tools/python on PYTHONPATH:
convert (model format converters), fixtures (writers of tests/fixtures and of the benchmark's random models),
checks (self-checks of the formats and the converter), training (the bundled model's training).
"""
import os

# The repository's root: tools/python/gpt2tools/ is three folders below it.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
