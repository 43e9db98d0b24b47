import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';

/**
 * Reads a file that must be a regular file of at most `maxBytes`, for input an operator (or an
 * attacker with write access to a config directory) controls: `/dev/zero` or a FIFO named as a
 * secret file, or a config file grown to gigabytes, must neither exhaust memory nor block the
 * event loop. The file is opened non-blocking (opening a FIFO waits for a writer otherwise),
 * checked through the open descriptor (no swap between check and read), and never read past
 * `maxBytes + 1` bytes even if it grows meanwhile.
 */

/** The file is not something to read: wrong kind, or too big. The message names the path. */
export class FileRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FileRefusedError';
  }
}

const OPEN_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;

/** Reads `path` as UTF-8, synchronously (bounded: one regular file of at most maxBytes). */
export function readBoundedFileSync(path: string, maxBytes: number): string {
  const fd = openSync(path, OPEN_FLAGS);
  try {
    const reader = new BoundedReader(path, checkStats(path, fstatSync(fd), maxBytes), maxBytes);
    while (reader.add(readSync(fd, reader.buf, reader.got, reader.room(), null)));
    return reader.text();
  } finally {
    closeSync(fd);
  }
}

/**
 * Reads `path` as UTF-8 without blocking the event loop (bounded as readBoundedFileSync).
 * node:fs/promises is imported on the first call: a process that only reads files at start (the
 * vip) does not load its JavaScript (0.5 MiB of heap; BENCHMARKS.md, "What the runtime's node
 * modules cost").
 */
export async function readBoundedFile(path: string, maxBytes: number): Promise<string> {
  const { open } = await import('node:fs/promises');
  const handle = await open(path, OPEN_FLAGS);
  try {
    const reader = new BoundedReader(path, checkStats(path, await handle.stat(), maxBytes), maxBytes);
    while (reader.add((await handle.read(reader.buf, reader.got, reader.room(), null)).bytesRead));
    return reader.text();
  } finally {
    await handle.close();
  }
}

function checkStats(path: string, stats: Stats, maxBytes: number): number {
  if (!stats.isFile()) throw new FileRefusedError(`${path} is ${fileKind(stats)}, not a regular file`);
  if (stats.size > maxBytes) throw new FileRefusedError(`${path} is ${stats.size} bytes, more than the limit of ${maxBytes} bytes`);
  return stats.size;
}

/**
 * The bytes read so far, in a buffer sized from the file's stat and grown (never past
 * maxBytes + 1) for files whose size says nothing, as /proc's, or that grew since.
 */
class BoundedReader {
  buf: Buffer;
  got = 0;

  constructor(private readonly path: string, size: number, private readonly maxBytes: number) {
    this.buf = Buffer.allocUnsafe(Math.min(size, maxBytes) + 1);
  }

  room(): number {
    return this.buf.length - this.got;
  }

  /** Counts `n` bytes read; false when the reading is over (end of file, or one byte past the limit). */
  add(n: number): boolean {
    this.got += n;
    if (n === 0 || this.got > this.maxBytes) return false;
    if (this.got === this.buf.length) {
      const bigger = Buffer.allocUnsafe(Math.min(this.buf.length * 2, this.maxBytes + 1));
      this.buf.copy(bigger, 0, 0, this.got);
      this.buf = bigger;
    }
    return true;
  }

  text(): string {
    if (this.got > this.maxBytes) throw new FileRefusedError(`${this.path} is more than the limit of ${this.maxBytes} bytes`);
    return this.buf.toString('utf8', 0, this.got);
  }
}

function fileKind(stats: Stats): string {
  if (stats.isDirectory()) return 'a directory';
  if (stats.isFIFO()) return 'a FIFO';
  if (stats.isCharacterDevice()) return 'a character device';
  if (stats.isBlockDevice()) return 'a block device';
  if (stats.isSocket()) return 'a socket';
  return 'a special file';
}
