package sidecar

import (
	"bytes"
	"math"
	"strconv"
	"strings"
)

// textContentType is what the Prometheus client library's handler
// announces for the text format, so scrapers see no difference.
const textContentType = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"

// The text format escapes backslashes and newlines in HELP, and also
// double quotes in label values.
var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// writeHeader writes the HELP and TYPE lines that open a family.
func writeHeader(b *bytes.Buffer, name, kind, help string) {
	b.WriteString("# HELP ")
	b.WriteString(name)
	b.WriteByte(' ')
	_, _ = helpEscaper.WriteString(b, help)
	b.WriteString("\n# TYPE ")
	b.WriteString(name)
	b.WriteByte(' ')
	b.WriteString(kind)
	b.WriteByte('\n')
}

// writeSample writes one line: name{label="value",...} value. labels
// alternate names and values, in the order they are written.
func writeSample(b *bytes.Buffer, name string, value float64, labels ...string) {
	b.WriteString(name)
	for i := 0; i+1 < len(labels); i += 2 {
		if i == 0 {
			b.WriteByte('{')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(labels[i])
		b.WriteString(`="`)
		_, _ = labelEscaper.WriteString(b, labels[i+1])
		b.WriteByte('"')
	}
	if len(labels) > 1 {
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(formatFloat(value))
	b.WriteByte('\n')
}

// formatFloat writes numbers as the Prometheus client library does:
// shortest representation, +Inf/-Inf/NaN spelled out.
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, +1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// histogram is one series of a classic Prometheus histogram.
type histogram struct {
	counts []uint64 // per bucket of the bounds, not cumulative
	count  uint64   // every observation, the +Inf bucket
	sum    float64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{counts: make([]uint64, len(bounds))}
}

// observe counts v in the first bucket whose upper bound is ≥ v.
func (h *histogram) observe(bounds []float64, v float64) {
	for i, upper := range bounds {
		if v <= upper {
			h.counts[i]++
			break
		}
	}
	h.count++
	h.sum += v
}

// write writes the buckets (cumulative, le last among the labels), _sum and
// _count of one series.
func (h *histogram) write(b *bytes.Buffer, name string, bounds []float64, labels ...string) {
	var cumulative uint64
	for i, upper := range bounds {
		cumulative += h.counts[i]
		writeSample(b, name+"_bucket", float64(cumulative), append(labels, "le", formatFloat(upper))...)
	}
	writeSample(b, name+"_bucket", float64(h.count), append(labels, "le", "+Inf")...)
	writeSample(b, name+"_sum", h.sum, labels...)
	writeSample(b, name+"_count", float64(h.count), labels...)
}
