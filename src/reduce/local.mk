# src/reduce
