"""govaluate (github.com/Knetic/govaluate), the dialect of Argo's `when`: its lexer, syntax check and evaluator."""
