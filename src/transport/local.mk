# src/transport
