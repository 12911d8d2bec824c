# src/coll
