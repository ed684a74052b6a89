//! placeholder: the python binding
