# src/stream
