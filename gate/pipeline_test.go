package gate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/portcullis/portcullis/gate"
)

// TestPipelineOrderIsTheDocumented runs the numbered list of
// docs/ARCHITECTURE.md ("The decision pipeline") against the gate's stage
// table: the same stages in the same order.
func TestPipelineOrderIsTheDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "\n## The decision pipeline\n")
	if start < 0 {
		t.Fatal(`docs/ARCHITECTURE.md has no section "The decision pipeline"`)
	}
	text = text[start+1:]
	if end := strings.Index(text, "\n### "); end >= 0 {
		text = text[:end]
	}
	var documented []string
	for _, m := range regexp.MustCompile(`(?m)^(\d+)\. \*\*([a-z ]+)\*\*`).FindAllStringSubmatch(text, -1) {
		documented = append(documented, strings.ReplaceAll(m[2], " ", "_"))
	}
	if len(documented) == 0 {
		t.Fatal("found no numbered stages in docs/ARCHITECTURE.md's pipeline")
	}
	if diff := cmp.Diff(documented, gate.PipelineStages()); diff != "" {
		t.Errorf("the gate's stage table differs from docs/ARCHITECTURE.md's pipeline (-documented +table):\n%s", diff)
	}
}

// endingFields are the fields of a decision that say how it ended. Only
// the one helper that ends a decision (end) sets them, and shadow, which
// rewrites a decision made into a pass-through.
var endingFields = []string{"Outcome", "PermissionLevel", "Code", "Source", "SourceElement", "Reason", "MatchedPolicy", "WhatWouldAuthorize"}

// TestOneHelperEndsADecision reads the gate's source: no stage sets how a
// decision ended, or marks a trace entry as the one that decided, by hand;
// each goes through the one helper, so every refusal carries its code,
// reason, trace entry and facts the same way.
func TestOneHelperEndsADecision(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	ended := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "end" {
						ended++
					}
				}
				as, ok := n.(*ast.AssignStmt)
				if !ok {
					return true
				}
				for i, lhs := range as.Lhs {
					sel, ok := lhs.(*ast.SelectorExpr)
					if !ok {
						continue
					}
					switch {
					case slices.Contains(endingFields, sel.Sel.Name) && isDecision(sel.X):
						if fn.Name.Name != "end" && fn.Name.Name != "shadow" {
							t.Errorf("%s: %s sets Decision.%s by hand; end the decision with end", fset.Position(as.Pos()), fn.Name.Name, sel.Sel.Name)
						}
					case sel.Sel.Name == "Decided" && i < len(as.Rhs) && isTrue(as.Rhs[i]):
						if fn.Name.Name != "end" {
							t.Errorf("%s: %s marks a trace entry as the one that decided; end the decision with end", fset.Position(as.Pos()), fn.Name.Name)
						}
					}
				}
				return true
			})
		}
	}
	// Every stage ends decisions through it: at least 20 places do.
	if ended < 20 {
		t.Errorf("found %d calls of end; the stages end decisions through it at least 20 times", ended)
	}
}

// isDecision reports whether x is the decision being made: e.d, or d.
func isDecision(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name == "d"
	case *ast.SelectorExpr:
		return x.Sel.Name == "d"
	}
	return false
}

func isTrue(x ast.Expr) bool {
	id, ok := x.(*ast.Ident)
	return ok && id.Name == "true"
}
