//! One way to wrap a [`crate::Transport`]: [`forward_transport!`] writes the methods a
//! wrapper hands to the transport inside it unchanged, so a wrapper spells out only what it
//! adds (counting sends, moving sends to a topic made anew).
//!
//! Why a macro: two wrappers forwarded every method by hand, and each method the trait
//! gained had to be added to both; one that was not (`react`, `draft` behind the metrics'
//! counting wrapper) silently fell back to the trait's default "cannot", so reactions and
//! streamed drafts stopped whenever `--metrics` was on.
//!
//! The forwarded methods are written in the shape `#[async_trait]` gives the trait's async
//! methods (a boxed future, one lifetime per borrowed argument), so they sit inside an
//! `#[async_trait] impl Transport` next to the wrapper's own `async fn`s.

/// Inside an `#[async_trait] impl Transport for Wrapper`, forwards each listed method to
/// the field `$inner` (an `Arc<dyn Transport>` or any `Transport`), unchanged:
///
/// ```ignore
/// #[async_trait]
/// impl Transport for Counted {
///     transport_core::forward_transport!(inner: id, capabilities, identify, stop);
///     async fn send(&self, message: OutboundMessage) -> Result<SendReceipt, TransportError> {
///         /* counted */
///     }
/// }
/// ```
///
/// A method neither listed nor written by the wrapper takes the trait's default, so list
/// every method the wrapper does not write itself (the wrappers' tests check that a wrapped
/// transport's answers come through).
#[macro_export]
macro_rules! forward_transport {
    ($inner:ident: $($method:ident),+ $(,)?) => {
        $( $crate::forward_transport!(@one $inner $method); )+
    };
    (@one $inner:ident id) => {
        fn id(&self) -> &str {
            self.$inner.id()
        }
    };
    (@one $inner:ident capabilities) => {
        fn capabilities(&self) -> $crate::Capabilities {
            self.$inner.capabilities()
        }
    };
    (@one $inner:ident max_upload_bytes) => {
        fn max_upload_bytes(&self) -> u64 {
            self.$inner.max_upload_bytes()
        }
    };
    (@one $inner:ident topic_place) => {
        fn topic_place(&self) -> Option<String> {
            self.$inner.topic_place()
        }
    };
    (@one $inner:ident topic_naming) => {
        fn topic_naming(&self) -> $crate::TopicNaming {
            self.$inner.topic_naming()
        }
    };
    (@one $inner:ident topics_in_private_chats) => {
        fn topics_in_private_chats(&self) -> bool {
            self.$inner.topics_in_private_chats()
        }
    };
    (@one $inner:ident topic_gone) => {
        fn topic_gone(&self, error: &$crate::TransportError) -> bool {
            self.$inner.topic_gone(error)
        }
    };
    (@one $inner:ident diagnose) => {
        fn diagnose(&self) -> String {
            self.$inner.diagnose()
        }
    };
    (@one $inner:ident identify) => {
        fn identify<'life0, 'async_trait>(
            &'life0 self,
        ) -> $crate::forward::Boxed<'async_trait, Result<$crate::BotIdentity, $crate::TransportError>>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.identify()
        }
    };
    (@one $inner:ident start) => {
        fn start<'life0, 'async_trait>(
            &'life0 self,
            sink: $crate::InboundSink,
        ) -> $crate::forward::Boxed<'async_trait, Result<(), $crate::TransportError>>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.start(sink)
        }
    };
    (@one $inner:ident stop) => {
        fn stop<'life0, 'async_trait>(&'life0 self) -> $crate::forward::Boxed<'async_trait, ()>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.stop()
        }
    };
    (@one $inner:ident send) => {
        fn send<'life0, 'async_trait>(
            &'life0 self,
            message: $crate::OutboundMessage,
        ) -> $crate::forward::Boxed<'async_trait, Result<$crate::SendReceipt, $crate::TransportError>>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.send(message)
        }
    };
    (@one $inner:ident typing) => {
        fn typing<'life0, 'life1, 'life2, 'async_trait>(
            &'life0 self,
            conversation_id: &'life1 str,
            thread_id: Option<&'life2 str>,
        ) -> $crate::forward::Boxed<'async_trait, Result<(), $crate::TransportError>>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            'life2: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.typing(conversation_id, thread_id)
        }
    };
    (@one $inner:ident react) => {
        fn react<'life0, 'life1, 'life2, 'async_trait>(
            &'life0 self,
            conversation_id: &'life1 str,
            message_id: &'life2 str,
            reaction: $crate::Reaction,
            replaces: Option<$crate::Reaction>,
        ) -> $crate::forward::Boxed<'async_trait, Result<(), $crate::TransportError>>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            'life2: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner
                .react(conversation_id, message_id, reaction, replaces)
        }
    };
    (@one $inner:ident draft) => {
        fn draft<'life0, 'life1, 'life2, 'life3, 'async_trait>(
            &'life0 self,
            conversation_id: &'life1 str,
            thread_id: Option<&'life2 str>,
            draft_id: u64,
            text: &'life3 str,
        ) -> $crate::forward::Boxed<'async_trait, Result<(), $crate::TransportError>>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            'life2: 'async_trait,
            'life3: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.draft(conversation_id, thread_id, draft_id, text)
        }
    };
    (@one $inner:ident fetch_attachment) => {
        fn fetch_attachment<'life0, 'life1, 'async_trait>(
            &'life0 self,
            reference: &'life1 str,
            max_bytes: u64,
        ) -> $crate::forward::Boxed<
            'async_trait,
            Result<$crate::FetchedAttachment, $crate::TransportError>,
        >
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.fetch_attachment(reference, max_bytes)
        }
    };
    (@one $inner:ident send_file) => {
        fn send_file<'life0, 'async_trait>(
            &'life0 self,
            file: $crate::OutboundFile,
        ) -> $crate::forward::Boxed<'async_trait, Result<$crate::SendReceipt, $crate::TransportError>>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.send_file(file)
        }
    };
    (@one $inner:ident create_topic) => {
        fn create_topic<'life0, 'life1, 'async_trait>(
            &'life0 self,
            name: &'life1 str,
        ) -> $crate::forward::Boxed<'async_trait, Result<$crate::Topic, $crate::TopicError>>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.create_topic(name)
        }
    };
    (@one $inner:ident create_private_topic) => {
        fn create_private_topic<'life0, 'life1, 'life2, 'async_trait>(
            &'life0 self,
            chat_id: &'life1 str,
            name: &'life2 str,
        ) -> $crate::forward::Boxed<'async_trait, Result<$crate::Topic, $crate::TopicError>>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            'life2: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.create_private_topic(chat_id, name)
        }
    };
    (@one $inner:ident resume_topic) => {
        fn resume_topic<'life0, 'life1, 'life2, 'async_trait>(
            &'life0 self,
            topic: &'life1 $crate::Topic,
            name: &'life2 str,
        ) -> $crate::forward::Boxed<'async_trait, Result<(), $crate::TopicError>>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            'life2: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.resume_topic(topic, name)
        }
    };
    (@one $inner:ident end_topic) => {
        fn end_topic<'life0, 'life1, 'life2, 'async_trait>(
            &'life0 self,
            topic: &'life1 $crate::Topic,
            name: &'life2 str,
        ) -> $crate::forward::Boxed<'async_trait, Result<(), $crate::TopicError>>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            'life2: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.end_topic(topic, name)
        }
    };
}

/// The future an `#[async_trait]` method returns: what [`forward_transport!`]'s methods
/// hand back from the inner transport as it is.
pub type Boxed<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
