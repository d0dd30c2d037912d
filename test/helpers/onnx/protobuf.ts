// The smallest protobuf encoder the ONNX writer needs: varints, 32-bit floats and
// length-delimited fields (strings, bytes, nested messages). Messages are built bottom-up: a
// nested message is encoded to bytes first, then written as a length-delimited field.

const WIRE_VARINT = 0;
const WIRE_LENGTH_DELIMITED = 2;
const WIRE_FIXED32 = 5;

export class ProtoWriter {
  private chunks: Uint8Array[] = [];
  private current = new Uint8Array(256);
  private used = 0;

  private reserve(n: number): void {
    if (this.used + n <= this.current.length) return;
    this.chunks.push(this.current.subarray(0, this.used));
    this.current = new Uint8Array(Math.max(n, 4096));
    this.used = 0;
  }

  private byte(b: number): void {
    this.reserve(1);
    this.current[this.used++] = b;
  }

  private bytes(data: Uint8Array): void {
    // Large payloads (weights) are kept as their own chunk instead of copied into the buffer.
    if (data.length > 4096) {
      this.chunks.push(this.current.subarray(0, this.used), data);
      this.current = new Uint8Array(4096);
      this.used = 0;
      return;
    }
    this.reserve(data.length);
    this.current.set(data, this.used);
    this.used += data.length;
  }

  /** Unsigned LEB128 of a 64-bit value; negative numbers take ten bytes (two's complement), as protobuf int64 does. */
  private varint(value: number | bigint): void {
    if (typeof value === 'number') {
      if (!Number.isSafeInteger(value)) throw new Error(`protobuf: varint ${value} is not a safe integer`);
      if (value >= 0 && value < 0x80000000) {
        let v = value;
        while (v >= 0x80) {
          this.byte((v & 0x7f) | 0x80);
          v >>>= 7;
        }
        this.byte(v);
        return;
      }
    }
    let v = BigInt.asUintN(64, BigInt(value));
    while (v >= 0x80n) {
      this.byte(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    this.byte(Number(v));
  }

  private tag(field: number, wire: number): void {
    this.varint(field * 8 + wire);
  }

  /** int32/int64/enum/bool field. */
  int(field: number, value: number | bigint): this {
    this.tag(field, WIRE_VARINT);
    this.varint(value);
    return this;
  }

  /** float field (fixed32). */
  float(field: number, value: number): this {
    this.tag(field, WIRE_FIXED32);
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, value, true);
    this.bytes(b);
    return this;
  }

  string(field: number, value: string): this {
    return this.raw(field, new TextEncoder().encode(value));
  }

  /** bytes field, or an already encoded nested message. */
  raw(field: number, data: Uint8Array): this {
    this.tag(field, WIRE_LENGTH_DELIMITED);
    this.varint(data.length);
    this.bytes(data);
    return this;
  }

  finish(): Uint8Array {
    const parts = [...this.chunks, this.current.subarray(0, this.used)];
    const total = parts.reduce((n, p) => n + p.length, 0);
    const out = new Uint8Array(total);
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
}
