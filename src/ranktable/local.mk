# src/ranktable
