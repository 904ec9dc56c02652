pub mod proc_cluster;
