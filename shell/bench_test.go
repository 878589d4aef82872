package shell_test

import (
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/shell"
)

func benchClassifier(b *testing.B) *shell.Classifier {
	return newClassifier(b, shell.Options{Rules: []portcullis.ShellRule{
		{Pattern: [][]string{{"git"}, {"push", "fetch"}}, Decision: portcullis.ShellConfirm},
		{Pattern: [][]string{{"make"}}, Decision: portcullis.ShellAllow},
		{Pattern: [][]string{{"curl"}}, Decision: portcullis.ShellDeny},
	}})
}

// typical is a 100-character command of the kind agents run all day.
const typical = `cd services/api && go test -race -run TestHandler ./... 2>&1 | tee /tmp/test.log | grep -v "^ok" -c `

func BenchmarkClassify(b *testing.B) {
	if len(typical) != 100 {
		b.Fatalf("the typical command has %d characters; want 100", len(typical))
	}
	c := benchClassifier(b)
	b.ReportAllocs()
	for b.Loop() {
		c.Classify(typical)
	}
}

// BenchmarkClassifyPipeline classifies a 40-stage pipeline of 577
// characters.
func BenchmarkClassifyPipeline(b *testing.B) {
	stages := []string{"cat access.log", "grep -v healthz", "awk '{print $1, $7}'", "sort", "uniq -c", "sort -rn", "head -n 100", "sed 's/^ *//'"}
	var parts []string
	for i := range 40 {
		parts = append(parts, stages[i%len(stages)])
	}
	cmd := strings.Join(parts, " | ")
	c := benchClassifier(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(cmd)))
	for b.Loop() {
		c.Classify(cmd)
	}
}

// BenchmarkClassifyNested classifies shell code nested in bash -c strings
// four levels deep (quoting makes it 161 characters).
func BenchmarkClassifyNested(b *testing.B) {
	cmd := "rm -rf /tmp/x"
	for range 4 {
		cmd = "bash -c " + quote(cmd)
	}
	c := benchClassifier(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(cmd)))
	for b.Loop() {
		c.Classify(cmd)
	}
}

// BenchmarkClassifyCorpus classifies the whole labelled corpus; the time
// per operation divided by the corpus size is the mean cost of a command.
func BenchmarkClassifyCorpus(b *testing.B) {
	entries := loadCorpus(b)
	c := benchClassifier(b)
	b.ReportAllocs()
	for b.Loop() {
		for _, e := range entries {
			c.Classify(e.Command)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(entries)), "ns/command")
}

func BenchmarkNew(b *testing.B) {
	rules := make([]portcullis.ShellRule, 100)
	for i := range rules {
		rules[i] = portcullis.ShellRule{Pattern: [][]string{{"tool"}, {"sub"}}, Decision: portcullis.ShellConfirm,
			Match: []string{"tool sub x", "sudo tool sub"}, NotMatch: []string{"tool other"}}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := shell.New(shell.Options{Rules: rules}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseTypical parses the typical command with mvdan.cc/sh alone,
// to show what share of BenchmarkClassify is the parser's.
func BenchmarkParseTypical(b *testing.B) {
	p := syntax.NewParser(syntax.Variant(syntax.LangBash))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Parse(strings.NewReader(typical), ""); err != nil {
			b.Fatal(err)
		}
	}
}
