package deploy_test

import (
	"go/ast"
	"go/printer"
	"go/token"
	"io"
)

func formatNode(w io.Writer, fset *token.FileSet, e ast.Expr) error {
	return printer.Fprint(w, fset, e)
}
