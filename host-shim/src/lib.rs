//! bot-connect host (being written).
