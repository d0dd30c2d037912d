// Encoders for the few ONNX messages a decoder graph needs (field numbers from onnx.proto):
// ModelProto, OperatorSetIdProto, GraphProto, NodeProto, AttributeProto, TensorProto,
// ValueInfoProto with its TypeProto.Tensor / TensorShapeProto. onnx.proto is proto2, so repeated
// scalars are written unpacked (one field per value), which every parser accepts.
import { ProtoWriter } from './protobuf';

/** TensorProto.DataType values used here. */
export enum OnnxDataType {
  FLOAT = 1,
  INT32 = 6,
  INT64 = 7,
  FLOAT16 = 10,
  DOUBLE = 11,
}

/** AttributeProto.AttributeType values used here. */
enum AttributeType {
  FLOAT = 1,
  INT = 2,
  INTS = 7,
}

export interface OnnxTensor {
  name: string;
  dataType: OnnxDataType.FLOAT | OnnxDataType.INT64;
  dims: number[];
  /** Float32Array for FLOAT, BigInt64Array for INT64; written as raw_data (little-endian). */
  data: Float32Array | BigInt64Array;
}

export type OnnxAttributeValue =
  | { kind: 'int'; value: number }
  | { kind: 'float'; value: number }
  | { kind: 'ints'; value: number[] };

export interface OnnxNode {
  opType: string;
  name: string;
  inputs: string[];
  outputs: string[];
  attributes?: Record<string, OnnxAttributeValue>;
}

export interface OnnxValueInfo {
  name: string;
  elemType: OnnxDataType;
  /** A number is a fixed size, a string a symbolic one. */
  shape: (number | string)[];
}

export interface OnnxGraph {
  name: string;
  nodes: OnnxNode[];
  initializers: OnnxTensor[];
  inputs: OnnxValueInfo[];
  outputs: OnnxValueInfo[];
}

export interface OnnxModel {
  irVersion: number;
  opsetVersion: number;
  producerName: string;
  graph: OnnxGraph;
}

export function encodeTensor(t: OnnxTensor): Uint8Array {
  const expected = t.dims.reduce((a, b) => a * b, 1);
  if (t.data.length !== expected) {
    throw new Error(`ONNX tensor '${t.name}': ${t.data.length} values for dims [${t.dims.join(', ')}] (${expected})`);
  }
  const w = new ProtoWriter();
  for (const d of t.dims) w.int(1, d); // dims
  w.int(2, t.dataType); // data_type
  w.string(8, t.name); // name
  w.raw(9, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)); // raw_data
  return w.finish();
}

function encodeAttribute(name: string, a: OnnxAttributeValue): Uint8Array {
  const w = new ProtoWriter().string(1, name); // name
  switch (a.kind) {
    case 'float':
      w.float(2, a.value).int(20, AttributeType.FLOAT); // f, type
      break;
    case 'int':
      w.int(3, a.value).int(20, AttributeType.INT); // i, type
      break;
    case 'ints':
      for (const v of a.value) w.int(8, v); // ints
      w.int(20, AttributeType.INTS);
      break;
  }
  return w.finish();
}

function encodeNode(n: OnnxNode): Uint8Array {
  const w = new ProtoWriter();
  for (const i of n.inputs) w.string(1, i);
  for (const o of n.outputs) w.string(2, o);
  w.string(3, n.name).string(4, n.opType);
  for (const [name, a] of Object.entries(n.attributes ?? {})) w.raw(5, encodeAttribute(name, a));
  return w.finish();
}

function encodeValueInfo(v: OnnxValueInfo): Uint8Array {
  const shape = new ProtoWriter();
  for (const d of v.shape) {
    const dim = typeof d === 'number' ? new ProtoWriter().int(1, d) : new ProtoWriter().string(2, d); // dim_value | dim_param
    shape.raw(1, dim.finish());
  }
  const tensorType = new ProtoWriter().int(1, v.elemType).raw(2, shape.finish()); // elem_type, shape
  const type = new ProtoWriter().raw(1, tensorType.finish()); // TypeProto.tensor_type
  return new ProtoWriter().string(1, v.name).raw(2, type.finish()).finish();
}

function encodeGraph(g: OnnxGraph): Uint8Array {
  const w = new ProtoWriter();
  for (const n of g.nodes) w.raw(1, encodeNode(n));
  w.string(2, g.name);
  for (const t of g.initializers) w.raw(5, encodeTensor(t));
  for (const i of g.inputs) w.raw(11, encodeValueInfo(i));
  for (const o of g.outputs) w.raw(12, encodeValueInfo(o));
  return w.finish();
}

/** The bytes of a .onnx file. */
export function encodeModel(m: OnnxModel): Uint8Array {
  const opset = new ProtoWriter().string(1, '').int(2, m.opsetVersion).finish(); // default domain
  return new ProtoWriter()
    .int(1, m.irVersion) // ir_version
    .string(2, m.producerName) // producer_name
    .raw(7, encodeGraph(m.graph)) // graph
    .raw(8, opset) // opset_import
    .finish();
}
