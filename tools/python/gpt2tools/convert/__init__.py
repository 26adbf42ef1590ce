"""Converters between model formats: Hugging Face safetensors folders, GGUF files and ONNX."""
