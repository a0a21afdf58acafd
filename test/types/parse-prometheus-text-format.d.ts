/** Types of `parse-prometheus-text-format` (it ships none): the Prometheus text exposition, parsed. */
declare module 'parse-prometheus-text-format' {
  export interface PromSample {
    readonly value?: string;
    readonly labels?: Record<string, string>;
    readonly buckets?: Record<string, string>;
    readonly count?: string;
    readonly sum?: string;
  }
  export interface PromFamily {
    readonly name: string;
    readonly help: string;
    readonly type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
    readonly metrics: readonly PromSample[];
  }
  export default function parsePrometheusTextFormat(text: string): PromFamily[];
}
