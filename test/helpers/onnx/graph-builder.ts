// Builds an ONNX graph one node at a time: every op returns the name of its output, so a model
// reads like the forward pass it describes. Constants become initializers.
import {
  encodeModel,
  OnnxDataType,
  type OnnxAttributeValue,
  type OnnxNode,
  type OnnxTensor,
  type OnnxValueInfo,
} from './onnx-proto';

export type Attrs = Record<string, OnnxAttributeValue>;

export const attr = {
  int: (value: number): OnnxAttributeValue => ({ kind: 'int', value }),
  float: (value: number): OnnxAttributeValue => ({ kind: 'float', value }),
  ints: (value: number[]): OnnxAttributeValue => ({ kind: 'ints', value }),
};

/** Opset 17: ReduceMean still takes `axes` as an attribute; Softmax works on one axis. */
export const OPSET = 17;
/** IR version 8 goes with opset 17. */
export const IR_VERSION = 8;

export class GraphBuilder {
  private readonly nodes: OnnxNode[] = [];
  private readonly initializers: OnnxTensor[] = [];
  private readonly inputs: OnnxValueInfo[] = [];
  private readonly outputs: OnnxValueInfo[] = [];
  private counter = 0;

  constructor(readonly name: string) {}

  private fresh(hint: string): string {
    return `${hint}_${this.counter++}`;
  }

  input(name: string, elemType: OnnxDataType, shape: (number | string)[]): string {
    this.inputs.push({ name, elemType, shape });
    return name;
  }

  /** Marks `value` as a graph output named `name` (through an Identity when the names differ). */
  output(value: string, name: string, elemType: OnnxDataType, shape: (number | string)[]): void {
    if (value !== name) this.nodes.push({ opType: 'Identity', name: this.fresh('Identity'), inputs: [value], outputs: [name] });
    this.outputs.push({ name, elemType, shape });
  }

  f32(hint: string, dims: number[], data: Float32Array | number[]): string {
    const name = this.fresh(hint);
    this.initializers.push({ name, dataType: OnnxDataType.FLOAT, dims, data: data instanceof Float32Array ? data : Float32Array.from(data) });
    return name;
  }

  /** An int64 vector (shapes, indices). */
  i64(hint: string, values: number[], dims: number[] = [values.length]): string {
    const name = this.fresh(hint);
    this.initializers.push({ name, dataType: OnnxDataType.INT64, dims, data: BigInt64Array.from(values.map((v) => BigInt(v))) });
    return name;
  }

  /** One node with one output; returns the output's name. */
  op(opType: string, inputs: string[], attributes?: Attrs): string {
    const out = this.fresh(opType);
    this.nodes.push({ opType, name: `${out}_node`, inputs, outputs: [out], ...(attributes ? { attributes } : {}) });
    return out;
  }

  toBytes(): Uint8Array {
    return encodeModel({
      irVersion: IR_VERSION,
      opsetVersion: OPSET,
      producerName: 'fulcrum-test',
      graph: { name: this.name, nodes: this.nodes, initializers: this.initializers, inputs: this.inputs, outputs: this.outputs },
    });
  }
}
