"""SIMD detection, PE program IR and its printer, and the dtg-codegen driver."""
