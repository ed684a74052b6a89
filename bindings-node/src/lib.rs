//! placeholder: the node binding
