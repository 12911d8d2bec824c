# src/bootstrap
