/** A YAML alias bomb: ten levels of ten aliases each, 10^10 nodes once expanded (a few hundred bytes of text). */
export function aliasBomb(): string {
  const lines = ['a: &a [x, x, x, x, x, x, x, x, x, x]'];
  for (let i = 1; i < 10; i++) {
    const name = String.fromCharCode(97 + i);
    const prev = String.fromCharCode(96 + i);
    lines.push(`${name}: &${name} [${Array(10).fill(`*${prev}`).join(', ')}]`);
  }
  return lines.join('\n') + '\n';
}
