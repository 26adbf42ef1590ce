// Runs /usr/bin/python3 with the Python tools' package (tools/python/gpt2tools) on PYTHONPATH: its modules
// (`-m gpt2tools.convert.convert_to_gguf`) and the scripts that import it (gguf_decode_bytes.py).
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const PYTHON_TOOLS = fileURLToPath(new URL('../python', import.meta.url));

// args: python3's arguments; options: execFileSync's. Returns what execFileSync returns.
export function runPython(args, options = {}) {
  return execFileSync('/usr/bin/python3', args, { ...options, env: { ...process.env, PYTHONPATH: PYTHON_TOOLS } });
}
