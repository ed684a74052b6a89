//! placeholder: the kotlin binding
