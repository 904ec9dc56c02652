pub struct BenchArgs;
