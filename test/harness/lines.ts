/**
 * Calls `onLine` for each line a child process writes, as it arrives: a line split across chunks
 * is joined, and a character split across chunks is decoded whole (one streaming decoder).
 */
export async function forEachLine(stream: ReadableStream<Uint8Array>, onLine: (line: string) => void): Promise<void> {
  const decoder = new TextDecoder();
  let pending = '';
  for await (const chunk of stream) {
    pending += decoder.decode(chunk, { stream: true });
    for (let newline = pending.indexOf('\n'); newline >= 0; newline = pending.indexOf('\n')) {
      const line = pending.slice(0, newline);
      pending = pending.slice(newline + 1);
      onLine(line);
    }
  }
}
