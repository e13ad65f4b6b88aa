"""expr-lang (github.com/expr-lang/expr v1.17), behind Argo's `{{=...}}` and `expression:`: lexer to evaluator."""
