package capabilities

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// skipped elements contribute no text: metadata, code, styling, embedded and invisible content.
var skipped = map[atom.Atom]bool{
	atom.Head: true, atom.Script: true, atom.Style: true, atom.Noscript: true,
	atom.Template: true, atom.Svg: true, atom.Iframe: true, atom.Object: true,
	atom.Canvas: true,
}

// blocks are elements whose start and end are line breaks in the text.
var blocks = map[atom.Atom]bool{
	atom.Address: true, atom.Article: true, atom.Aside: true, atom.Blockquote: true,
	atom.Body: true, atom.Br: true, atom.Caption: true, atom.Dd: true, atom.Details: true,
	atom.Dialog: true, atom.Div: true, atom.Dl: true, atom.Dt: true, atom.Fieldset: true,
	atom.Figcaption: true, atom.Figure: true, atom.Footer: true, atom.Form: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Header: true, atom.Hr: true, atom.Html: true, atom.Li: true, atom.Main: true,
	atom.Nav: true, atom.Ol: true, atom.P: true, atom.Pre: true, atom.Section: true,
	atom.Summary: true, atom.Table: true, atom.Tr: true, atom.Ul: true,
}

// cells are separated from their neighbours by a space.
var cells = map[atom.Atom]bool{atom.Td: true, atom.Th: true}

// parseHTML runs htmlToText but gives up when ctx ends: parsing a hostile document of
// MaxBytes can take seconds of CPU, and the fetch's time bound must hold. An abandoned parse
// finishes on its own (its input is bounded).
func parseHTML(ctx context.Context, doc string) (title, text string, err error) {
	type result struct {
		title, text string
		err         error
	}
	done := make(chan result, 1)
	go func() {
		t, x, err := htmlToText(doc)
		done <- result{t, x, err}
	}()
	select {
	case r := <-done:
		return r.title, r.text, r.err
	case <-ctx.Done():
		return "", "", fmt.Errorf("parse html: %w", context.Cause(ctx))
	}
}

// htmlToText parses an HTML document (already UTF-8) and returns the text of its first
// <title> and its readable text. Character references are decoded by the parser. It fails
// only when the parser refuses the document (elements nested deeper than 512).
func htmlToText(doc string) (title, text string, err error) {
	root, err := html.Parse(strings.NewReader(doc))
	if err != nil {
		return "", "", fmt.Errorf("parse html: %w", err)
	}
	walk(root, func(n *html.Node) bool {
		if title != "" || n.Type == html.TextNode {
			return false
		}
		if n.Type == html.ElementNode && n.DataAtom == atom.Title && n.Namespace == "" {
			title = collapse(textContent(n))
			return false
		}
		return n.Namespace == ""
	}, nil)

	var w textWriter
	walk(root, w.enter, w.exit)
	return title, strings.TrimSpace(w.out.String()), nil
}

// walk visits the tree under root depth-first without recursion, so deeply nested input
// cannot exhaust the stack. enter returns whether to visit n's children; exit, if non-nil,
// runs after them (also for nodes whose children were not visited).
func walk(root *html.Node, enter func(*html.Node) bool, exit func(*html.Node)) {
	for n := root; n != nil; {
		if enter(n) && n.FirstChild != nil {
			n = n.FirstChild
			continue
		}
		for n != nil {
			if exit != nil {
				exit(n)
			}
			if n == root {
				return
			}
			if n.NextSibling != nil {
				n = n.NextSibling
				break
			}
			n = n.Parent
		}
	}
}

// textContent concatenates the text nodes under n.
func textContent(n *html.Node) string {
	var b strings.Builder
	walk(n, func(c *html.Node) bool {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
		return true
	}, nil)
	return b.String()
}

// textWriter accumulates text with collapsed whitespace: a pending separator (space or line
// break) is written only between two pieces of text, so runs of blocks give one line break.
type textWriter struct {
	out     strings.Builder
	pre     int // depth of <pre> elements, whose text keeps its layout
	space   bool
	newline bool
}

func (w *textWriter) enter(n *html.Node) bool {
	switch n.Type {
	case html.DocumentNode:
		return true
	case html.TextNode:
		if w.pre > 0 {
			w.verbatim(n.Data)
		} else {
			w.text(n.Data)
		}
		return false
	case html.ElementNode:
		switch {
		case n.Namespace == "math":
			return true // MathML: keep its text, no layout
		case n.Namespace != "", skipped[n.DataAtom], hasAttr(n, "hidden"):
			return false
		}
		if n.DataAtom == atom.Pre {
			w.pre++
		}
		w.boundary(n)
		return true
	}
	return false // comments, doctypes
}

func (w *textWriter) exit(n *html.Node) {
	if n.Type != html.ElementNode || n.Namespace != "" || skipped[n.DataAtom] || hasAttr(n, "hidden") {
		return
	}
	if n.DataAtom == atom.Pre {
		w.pre--
	}
	w.boundary(n)
}

func (w *textWriter) boundary(n *html.Node) {
	switch {
	case blocks[n.DataAtom]:
		w.newline = true
	case cells[n.DataAtom]:
		w.space = true
	}
}

// sep writes the pending separator, if any text precedes it.
func (w *textWriter) sep() {
	if w.out.Len() > 0 {
		switch {
		case w.newline:
			w.out.WriteByte('\n')
		case w.space:
			w.out.WriteByte(' ')
		}
	}
	w.newline, w.space = false, false
}

func (w *textWriter) text(s string) {
	if s == "" {
		return
	}
	if strings.TrimLeftFunc(s, unicode.IsSpace) != s {
		w.space = true
	}
	for i, word := range strings.Fields(s) {
		if i > 0 {
			w.space = true
		}
		w.sep()
		w.out.WriteString(word)
	}
	if strings.TrimRightFunc(s, unicode.IsSpace) != s {
		w.space = true
	}
}

func (w *textWriter) verbatim(s string) {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if s == "" {
		return
	}
	w.sep()
	w.out.WriteString(s)
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return true
		}
	}
	return false
}

// collapse joins the words of s with single spaces.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }
