pub mod gen {}
