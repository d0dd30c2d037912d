// A Python file of `n` small functions named `${name}_0` … (the completion tests' document: every
// function differs, and the same n gives the same text).
export function pythonFunctions(n: number, name = 'handler'): string {
  const lines = ['import os', ''];
  for (let i = 0; i < n; i++) lines.push(`def ${name}_${i}(request, retries=${i % 7}):`, `    value = request.get("key_${i}", ${i})`, `    return value * ${i + 1} + retries`, '');
  return lines.join('\n');
}
